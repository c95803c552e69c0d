"""`specgen mcp`: agent code through a grant, over the Model Context Protocol."""
