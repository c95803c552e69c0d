"""The memory-grant example: agent code reaching Cloudflare's Agent Memory API through a grant.

The package holds the API's OpenAPI extract, the fake that answers it on loopback, and
(later) the runner that drives the five runs and writes the page.
"""
