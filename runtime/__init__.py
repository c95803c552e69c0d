"""The sandbox, the broker and the grants that decide what agent code may call."""
