"""haptic's configuration from the environment, read in one place (`config/env.py`).

Standard library only and free of side effects, so every process kind imports it: the web
site and the controller (through `haptic_site/settings.py` and directly), the agent and the
local cluster (which run without Django), the development stack and the soak.
"""
