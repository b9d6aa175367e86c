"""One module per library; each exposes `NAME`, `DISTRIBUTIONS` and `cases(env)`."""

ADAPTERS = ("toolweave", "langchain", "pydantic_ai", "openai_agents", "llama_index")
