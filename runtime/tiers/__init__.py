"""Isolation tiers: where the engine runs relative to the key.

`process`: the engine, the broker and the key in one process (`runtime.session`).
`worker`: the engine in its own process under bubblewrap, with no network, no key, no
grants file and no writable files, asking the broker in this process for every host
call over a pipe. `gvisor`: that engine process inside gVisor (`runsc do`). Modules:
`wire` (the framing, plain data only), `engine_process` (the engine's side; imports
nothing from `runtime.broker`), `launch` (the command line and view of each tier),
`boundary` (the broker's side: an `EngineProcess` and `run_isolated`).
"""
