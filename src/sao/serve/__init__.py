"""`sao serve`: the policy behind the OpenAI chat API, learning live from single feedback."""
