"""The Mem0 example: agent code reaching Mem0 Platform through a grant.

Mem0's document as published, a loopback fake that answers it, the runs (add, search
with filters, list with pagination, one refused call) and the page computed from them.
"""
