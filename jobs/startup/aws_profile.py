"""The AWS shared files' credentials and region, for the libraries that read only the environment.

A lake in an S3 bucket is reached by four libraries: pyarrow and DuckDB (the AWS C++ SDK, which
reads ``~/.aws/credentials`` and ``~/.aws/config`` itself), delta-rs and obstore (Rust's
``object_store``, which reads environment variables, web identity and instance roles, but not the
shared files). So that all four see one configuration, :func:`adopt_shared_profile` copies the
profile's static credentials and region into this process's environment when the environment
names no access key; Spark and its Python workers on this machine inherit it.

The profile is ``AWS_PROFILE`` (else ``default``); the files are ``AWS_SHARED_CREDENTIALS_FILE``
and ``AWS_CONFIG_FILE`` (else the ones under ``~/.aws``). Profiles whose credentials come from
elsewhere (``credential_process``, SSO, ``role_arn``) are not resolved here: export their
credentials, or use an instance or web-identity role, which every library finds by itself.
"""

from __future__ import annotations

import configparser
import os
from collections.abc import MutableMapping
from pathlib import Path

_SETTINGS = {
    "aws_access_key_id": "AWS_ACCESS_KEY_ID",
    "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "aws_session_token": "AWS_SESSION_TOKEN",
    "region": "AWS_REGION",
}


def _section(path: Path, name: str) -> dict[str, str]:
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return {}  # unreadable: the libraries report the credentials they miss
    return dict(parser[name]) if parser.has_section(name) else {}


def adopt_shared_profile(environ: MutableMapping[str, str] = os.environ) -> list[str]:
    """Copy the shared files' credentials and region of the profile into ``environ`` when it
    names no access key (the module doc); the names of the variables set.

    >>> adopt_shared_profile({"AWS_ACCESS_KEY_ID": "set already"})
    []
    """
    if environ.get("AWS_ACCESS_KEY_ID"):
        return []
    home = Path.home() / ".aws"
    profile = environ.get("AWS_PROFILE") or "default"
    credentials = Path(environ.get("AWS_SHARED_CREDENTIALS_FILE") or home / "credentials")
    config = Path(environ.get("AWS_CONFIG_FILE") or home / "config")
    in_config = "default" if profile == "default" else f"profile {profile}"
    found = {**_section(config, in_config), **_section(credentials, profile)}
    if not found.get("aws_access_key_id") and not found.get("region"):
        return []
    named = []
    for setting, variable in _SETTINGS.items():
        value = found.get(setting)
        if value and not environ.get(variable):
            if variable == "AWS_REGION" and environ.get("AWS_DEFAULT_REGION"):
                continue
            environ[variable] = value
            named.append(variable)
    return named
