"""The text formats of an action: the tags a policy writes (`tags`) and the function-call formats
that environments and `sao serve` render and parse (`tool_calls`)."""
