"""The AWS shared files' credentials and region reach the environment the Rust libraries read."""

from __future__ import annotations

from jobs.startup.aws_profile import adopt_shared_profile

CREDENTIALS = """\
[default]
aws_access_key_id = default-key
aws_secret_access_key = default-secret

[analytics]
aws_access_key_id = analytics-key
aws_secret_access_key = analytics-secret
aws_session_token = analytics-token
"""
CONFIG = """\
[default]
region = eu-west-1

[profile analytics]
region = eu-central-1
"""


def files(tmp_path, **environ):
    (tmp_path / "credentials").write_text(CREDENTIALS)
    (tmp_path / "config").write_text(CONFIG)
    return {
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        **environ,
    }


def test_the_default_profile_fills_an_environment_without_keys(tmp_path):
    env = files(tmp_path)
    assert adopt_shared_profile(env) == ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"]
    assert (env["AWS_ACCESS_KEY_ID"], env["AWS_REGION"]) == ("default-key", "eu-west-1")


def test_the_named_profile_and_its_config_section(tmp_path):
    env = files(tmp_path, AWS_PROFILE="analytics")
    adopt_shared_profile(env)
    assert env["AWS_SECRET_ACCESS_KEY"] == "analytics-secret"
    assert (env["AWS_SESSION_TOKEN"], env["AWS_REGION"]) == ("analytics-token", "eu-central-1")


def test_keys_in_the_environment_win_and_nothing_is_mixed_in(tmp_path):
    env = files(tmp_path, AWS_ACCESS_KEY_ID="env-key", AWS_SECRET_ACCESS_KEY="env-secret")
    assert adopt_shared_profile(env) == []
    assert env["AWS_ACCESS_KEY_ID"] == "env-key" and "AWS_REGION" not in env


def test_a_region_in_the_environment_is_kept(tmp_path):
    env = files(tmp_path, AWS_DEFAULT_REGION="us-west-2")
    adopt_shared_profile(env)
    assert "AWS_REGION" not in env and env["AWS_ACCESS_KEY_ID"] == "default-key"


def test_missing_or_unreadable_files_change_nothing(tmp_path):
    (tmp_path / "bad").write_text("not [an ini")
    env = {"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "bad"), "AWS_CONFIG_FILE": "/nowhere"}
    assert adopt_shared_profile(env) == []
    assert set(env) == {"AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"}
