"""Tools that model-written actions may call; model code runs only inside
`sao.tools.sandbox.run_python`."""
