"""Cross-cluster Active/Standby (seed 004): detect a dead Active control plane and promote
the Standby. Entry points: `HubConfig` / `parent_parser` (flags), `build_hub` (wiring),
`WriteFence` (what reconcilers consult), `resolve` (which hub is Active)."""
