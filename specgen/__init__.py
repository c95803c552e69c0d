"""Generate allow lists, a typed JS client and a model description from OpenAPI."""
