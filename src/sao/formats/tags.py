"""The tool tags, one definition for the tokenizer (single tokens) and the environments (text)."""

PYTHON_OPEN = "<python>"
PYTHON_CLOSE = "</python>"
OUTPUT_OPEN = "<output>"
OUTPUT_CLOSE = "</output>"
ANSWER_OPEN = "<answer>"
ANSWER_CLOSE = "</answer>"
TOOL_OPEN = "<tool>"
TOOL_CLOSE = "</tool>"

ALL_TAGS: tuple[str, ...] = (
    PYTHON_OPEN,
    PYTHON_CLOSE,
    OUTPUT_OPEN,
    OUTPUT_CLOSE,
    ANSWER_OPEN,
    ANSWER_CLOSE,
    TOOL_OPEN,
    TOOL_CLOSE,
)
