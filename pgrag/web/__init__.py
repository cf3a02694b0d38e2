"""The web console served at / by `pgrag serve --transport http`: server-rendered pages over
the same services as REST and MCP (routes in app.py and pages/, templates/, static/)."""
