// The official TypeScript SDK's OAuth client (pinned in package.json) against `pgrag serve`
// with OAuth on: discovery from a 401, dynamic registration, authorization code + PKCE
// (the browser part is the test's: it reads the URL printed here, drives the consent page
// and sends back the callback URL on stdin), a search over Streamable HTTP, a refresh, a
// revocation and the 401 after it. One JSON line per step on stdout; tests/test_oauth_sdk.py.
//
//   node oauth_client.mjs <mcp url> <redirect url>
import readline from "node:readline";

import { auth, UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [serverUrl, redirectUrl] = process.argv.slice(2);
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const say = (step) => process.stdout.write(JSON.stringify(step) + "\n");

const saved = {};
const provider = {
  get redirectUrl() {
    return redirectUrl;
  },
  get clientMetadata() {
    return {
      client_name: "TS SDK test client",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  clientInformation: () => saved.client,
  saveClientInformation: (info) => void (saved.client = info),
  tokens: () => saved.tokens,
  saveTokens: (tokens) => void (saved.tokens = tokens),
  redirectToAuthorization: (url) => say({ step: "authorize", url: url.href }),
  saveCodeVerifier: (verifier) => void (saved.verifier = verifier),
  codeVerifier: () => saved.verifier,
  saveDiscoveryState: (state) => void (saved.discovery = state),
  discoveryState: () => saved.discovery,
};

async function search(options) {
  const client = new Client({ name: "pgrag-oauth-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(serverUrl), options));
  try {
    const found = await client.callTool({ name: "search", arguments: { query: "lighthouse", limit: 10 } });
    return found.structuredContent.data.results.map((hit) => hit.path).sort();
  } finally {
    await client.close();
  }
}

const first = new StreamableHTTPClientTransport(new URL(serverUrl), { authProvider: provider });
try {
  await new Client({ name: "pgrag-oauth-test", version: "1.0.0" }).connect(first);
  throw new Error("connected without authorization");
} catch (error) {
  if (!(error instanceof UnauthorizedError)) throw error;
}
const callback = new URL((await lines.next()).value);
if (callback.searchParams.get("iss") !== saved.discovery.authorizationServerMetadata.issuer) {
  throw new Error(`iss ${callback.searchParams.get("iss")} is not the issuer`);
}
await first.finishAuth(callback.searchParams.get("code"));
const issued = saved.tokens;
say({ step: "searched", paths: await search({ authProvider: provider }), scope: issued.scope });

await auth(provider, { serverUrl: new URL(serverUrl) }); // a refresh token is stored: refresh
const renewed = saved.tokens;
const rotated = renewed.refresh_token !== issued.refresh_token && renewed.access_token !== issued.access_token;
say({ step: "refreshed", rotated, paths: await search({ authProvider: provider }) });

const metadata = saved.discovery.authorizationServerMetadata;
const revoked = await fetch(metadata.revocation_endpoint, {
  method: "POST",
  body: new URLSearchParams({ token: renewed.access_token, client_id: saved.client.client_id, client_secret: "" }),
});
let after = "no error";
try {
  await search({ requestInit: { headers: { Authorization: `Bearer ${renewed.access_token}` } } });
} catch (error) {
  after = String(error.code ?? error.message);
}
say({ step: "revoked", status: revoked.status, after });
process.exit(0);
