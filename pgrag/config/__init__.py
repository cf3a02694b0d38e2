"""The settings by subsystem: each group is a pydantic model its code can take."""
