"""Settings: flags, environment, validation; standalone is the inert default."""

from __future__ import annotations

import argparse

import pytest

from controller.hub.config import HaMode, HubConfig, parent_parser, parse_config
from controller.hub.hub import build_hub


def test_default_is_standalone_and_inert() -> None:
    config = parse_config([])
    assert config.mode is HaMode.STANDALONE
    assert not config.enabled
    # Standalone builds no client and needs none: nothing is read, written or published.
    hub = build_hub(config, local_api_client=None)
    assert hub.fence.is_open()
    assert hub.elector is None and hub.publisher is None and hub.mirror is None
    assert hub.promoter is None and hub.watcher is None
    hub.start()
    hub.stop()
    assert hub.is_leader()
    status = hub.status()
    assert status.mode == "standalone" and status.fence_open and not status.armed


def test_mistyped_mode_is_refused_at_start_up(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_config(["--ha-mode", "stanby"])
    assert "invalid --ha-mode 'stanby'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="invalid --ha-mode"):
        HubConfig.from_env({"HAPTIC_HA_MODE": "activ"})


def test_flags_reach_the_config() -> None:
    parser = argparse.ArgumentParser(parents=[parent_parser()])
    parser.add_argument("--other")
    args = parser.parse_args(
        [
            "--ha-mode", "standby", "--ha-active-kubeconfig", "/tmp/a.kubeconfig",
            "--ha-lease-duration", "6", "--ha-renew-deadline", "4", "--ha-retry-period", "1",
            "--ha-padding-seconds", "2", "--ha-promotion-dial-timeout", "0.5",
            "--ha-promotion-grace-period", "3", "--ha-identity", "hub-b", "--other", "x",
        ]
    )  # fmt: skip
    config = HubConfig.from_args(args)
    assert config.mode is HaMode.STANDBY
    assert (config.lease_duration, config.renew_deadline, config.retry_period) == (6, 4, 1)
    assert config.padding_seconds == 2
    assert config.promotion_dial_timeout == 0.5
    assert config.promotion_grace_period == 3
    assert config.identity == "hub-b"
    assert config.active_kubeconfig == "/tmp/a.kubeconfig"


def test_environment_twins() -> None:
    config = HubConfig.from_env(
        {
            "HAPTIC_HA_MODE": "active",
            "HAPTIC_HA_LEASE_DURATION": "9",
            "HAPTIC_HA_RENEW_DEADLINE": "6",
            "HAPTIC_HA_RETRY_PERIOD": "2",
            "HAPTIC_HA_IDENTITY": "hub-a",
            "HAPTIC_NAMESPACE": "ops",
        }
    )
    assert config.mode is HaMode.ACTIVE
    assert config.lease_duration == 9
    assert config.namespace == "ops"
    with pytest.raises(ValueError, match="not a number"):
        HubConfig.from_env({"HAPTIC_HA_PADDING_SECONDS": "ten"})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"lease_duration": 5, "renew_deadline": 5}, "lease_duration > renew_deadline"),
        ({"promotion_dial_timeout": 0}, "promotion_dial_timeout must be positive"),
        ({"padding_seconds": -1}, "padding_seconds"),
        ({"mode": HaMode.STANDBY}, "needs --ha-active-kubeconfig"),
        ({"mirror_source": "cluster a/1"}, "not a label value"),
    ],
)
def test_invalid_settings_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        HubConfig(**kwargs)


def test_active_needs_the_controllers_client() -> None:
    with pytest.raises(ValueError, match="needs the controller's API client"):
        build_hub(HubConfig(mode=HaMode.ACTIVE, identity="a"))
