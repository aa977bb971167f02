"""A lake on Azure storage (Blob or ADLS Gen2): its two spellings, the account and credentials of
the standard Azure environment, and what each library that reads the lake needs of them.

A lake may be named ``az://CONTAINER/PREFIX`` (the account from ``AZURE_STORAGE_ACCOUNT_NAME``)
or ``abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX`` (the account in the name, as Spark
and Databricks spell it). Other Azure spellings (``adl://``, ``wasb://``, ``wasbs://``,
``abfs://``, ``azure://``) are refused by the configuration's check naming these two
(:data:`AZURE_SCHEMES`, :func:`jobs.config.checks.check_lake_name`).

Four libraries read a lake: delta-rs and obstore (Rust's ``object_store``) read the standard
Azure environment themselves; pyarrow (:func:`azure_filesystem`) and DuckDB
(:func:`duckdb_secret_fields`) are given what they need of it here, so that all four see one
account and one credential:

* ``AZURE_STORAGE_ACCOUNT_NAME`` (or ``AZURE_STORAGE_ACCOUNT``): the account of an ``az://`` lake;
* ``AZURE_STORAGE_ACCOUNT_KEY`` (or ``AZURE_STORAGE_KEY``): a shared key;
* ``AZURE_STORAGE_SAS_TOKEN``: a shared access signature instead;
* ``AZURE_CLIENT_ID``, ``AZURE_CLIENT_SECRET``, ``AZURE_TENANT_ID``: a service principal;
* none of these: the default credential chain of each library (managed identity, Azure CLI);
* ``AZURE_STORAGE_USE_EMULATOR=true``: the Azurite emulator's well-known account and key, at
  ``AZURITE_BLOB_STORAGE_URL`` (default ``http://127.0.0.1:10000``).

The secrets among them (:data:`SECRET_VARIABLES`, and a connection string's ``AccountKey=`` /
``SharedAccessSignature=`` parts) are removed from every message by
:func:`sinks.lake.object_store.redact`; none is written to the lake.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

AZURE_SCHEMES = ("az", "abfss")
"""The spellings of a lake on Azure storage that are supported (tested against Azurite)."""
REFUSED_SCHEMES = ("adl", "wasb", "wasbs", "abfs", "azure", "adls")
"""Azure spellings refused with the supported ones named: another client's (Hadoop's legacy
drivers, unencrypted ``abfs``), read differently or not at all by delta-rs, DuckDB or pyarrow."""
SECRET_VARIABLES = (
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_ACCESS_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_CLIENT_SECRET",
    "AZURE_STORAGE_CONNECTION_STRING",
)
"""The Azure environment variables whose values are secrets (redacted from every message)."""
EMULATOR_ACCOUNT = "devstoreaccount1"
"""Azurite's account (public, documented with the emulator)."""
EMULATOR_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
"""Azurite's account key (public, documented with the emulator: no secret)."""
EMULATOR_URL = "http://127.0.0.1:10000"
"""Azurite's blob endpoint when ``AZURITE_BLOB_STORAGE_URL`` does not name another."""

_CONNECTION_SECRETS = re.compile(r"(?i)(AccountKey|SharedAccessSignature|sig)=([^;&\s'\"]+)")


def is_azure(location: str) -> bool:
    """Whether ``location`` names a place on Azure storage (a supported spelling)."""
    return location.partition("://")[0].lower() in AZURE_SCHEMES and "://" in location


@dataclass(frozen=True)
class AzurePlace:
    """Where an Azure location is: its ``container``, its ``account`` when the name says it
    (``abfss://``), and the ``path`` inside the container (no leading or trailing ``/``)."""

    container: str
    account: str | None
    path: str


def azure_place(location: str) -> AzurePlace:
    """The container, account and path of ``location`` (``az://C/P`` or
    ``abfss://C@ACCOUNT.dfs.core.windows.net/P``). Raises ValueError naming the spellings for
    another one, or a name without a container (or an ``abfss://`` name without an account)."""
    parts = urlsplit(location)
    scheme = parts.scheme.lower()
    if scheme not in AZURE_SCHEMES:
        raise ValueError(f"{location}: {supported_spellings()}")
    path = parts.path.strip("/")
    if scheme == "az":
        container, account = parts.netloc, None
    else:
        container, _, host = parts.netloc.partition("@")
        account = host.split(".")[0] if "." in host else None
        if not account:
            raise ValueError(
                f"{location}: an abfss:// lake names its account: "
                "abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX"
            )
    if not container:
        raise ValueError(f"{location}: no container: {supported_spellings()}")
    return AzurePlace(container, account, path)


def supported_spellings() -> str:
    """The sentence naming the supported Azure spellings of a lake."""
    return (
        "a lake on Azure storage is az://CONTAINER/PREFIX (the account from "
        "AZURE_STORAGE_ACCOUNT_NAME) or abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX"
    )


@dataclass(frozen=True)
class AzureAccount:
    """The account and credential of the standard Azure environment (:func:`azure_account`).
    ``blob_url`` is the blob endpoint (``scheme://host[:port]`` and, for the emulator, the
    account's path); ``key``, ``sas_token`` and ``client_*`` / ``tenant_id`` are the credential
    (all None: the libraries' default chains)."""

    name: str | None
    blob_url: str | None
    emulator: bool = False
    key: str | None = None
    sas_token: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    tenant_id: str | None = None

    def __repr__(self) -> str:  # never the credential
        return f"AzureAccount(name={self.name!r}, blob_url={self.blob_url!r})"


def _first(env: Mapping[str, str], *names: str) -> str | None:
    return next((env[n] for n in names if env.get(n)), None)


def azure_account(location: str, environ: Mapping[str, str] | None = None) -> AzureAccount:
    """The account of ``location`` and the credential from the standard Azure environment
    (``environ``, default ``os.environ``), as delta-rs and obstore read them."""
    env = os.environ if environ is None else environ
    place = azure_place(location)
    key = _first(env, "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCESS_KEY")
    if env.get("AZURE_STORAGE_USE_EMULATOR", "").lower() in ("true", "1"):
        url = env.get("AZURITE_BLOB_STORAGE_URL") or EMULATOR_URL
        return AzureAccount(
            EMULATOR_ACCOUNT,
            f"{url.rstrip('/')}/{EMULATOR_ACCOUNT}",
            emulator=True,
            key=key or EMULATOR_KEY,
        )
    name = place.account or _first(env, "AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT")
    sas = _first(env, "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_SAS_KEY")
    return AzureAccount(
        name,
        f"https://{name}.blob.core.windows.net" if name else None,
        key=key,
        sas_token=sas.lstrip("?") if sas else None,
        client_id=env.get("AZURE_CLIENT_ID") or None,
        client_secret=env.get("AZURE_CLIENT_SECRET") or None,
        tenant_id=env.get("AZURE_TENANT_ID") or None,
    )


def azure_filesystem(location: str) -> tuple[Any, str]:
    """The ``pyarrow.fs.AzureFileSystem`` of ``location``'s account (its root is the account:
    paths are ``container/path``) and ``location``'s path in it. pyarrow's ``from_uri`` reads no
    ``az://`` name, so the filesystem is made from :func:`azure_account`. Raises ValueError
    when the account is not known (``az://`` without ``AZURE_STORAGE_ACCOUNT_NAME``)."""
    import pyarrow.fs as pafs

    place = azure_place(location)
    account = azure_account(location)
    if not account.name or not account.blob_url:
        raise ValueError(
            f"{location}: the storage account is not known: set AZURE_STORAGE_ACCOUNT_NAME, or "
            "name it (abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX)"
        )
    options: dict[str, Any] = {}
    if account.emulator:
        endpoint = urlsplit(account.blob_url)
        options.update(
            blob_storage_authority=endpoint.netloc,
            blob_storage_scheme=endpoint.scheme,
            dfs_storage_authority=endpoint.netloc,  # Azurite has no DFS endpoint: never used
            dfs_storage_scheme=endpoint.scheme,
        )
    if account.key:
        options["account_key"] = account.key
    elif account.sas_token:
        options["sas_token"] = account.sas_token
    elif account.client_id and account.client_secret and account.tenant_id:
        options.update(
            client_id=account.client_id,
            client_secret=account.client_secret,
            tenant_id=account.tenant_id,
        )
    fs = pafs.AzureFileSystem(account.name, **options)
    return fs, f"{place.container}/{place.path}".rstrip("/")


def duckdb_secret_fields(location: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The fields of a DuckDB ``TYPE azure`` secret for ``location``'s account from the standard
    Azure environment: a connection string for a shared key, a SAS token or the emulator; a
    service principal (``PROVIDER service_principal``); else the credential chain with the
    account's name. The ``azure`` extension and ``delta_scan`` (delta-kernel) read it."""
    account = azure_account(location, environ)
    if account.key or account.sas_token:
        parts = [f"BlobEndpoint={account.blob_url}"] if account.blob_url else []
        if account.emulator:
            parts = ["DefaultEndpointsProtocol=http", *parts]
        if account.key:
            parts += [f"AccountName={account.name}", f"AccountKey={account.key}"]
        else:
            parts += [f"SharedAccessSignature={account.sas_token}"]
        return {"CONNECTION_STRING": ";".join(parts)}
    if account.client_id and account.client_secret and account.tenant_id:
        return {
            "PROVIDER": "service_principal",
            "TENANT_ID": account.tenant_id,
            "CLIENT_ID": account.client_id,
            "CLIENT_SECRET": account.client_secret,
            "ACCOUNT_NAME": account.name or "",
        }
    fields = {"PROVIDER": "credential_chain"}
    if account.name:
        fields["ACCOUNT_NAME"] = account.name
    return fields


def redact_connection_secrets(text: str) -> str:
    """``text`` without the secret parts of any connection string or SAS URL it holds
    (``AccountKey=``, ``SharedAccessSignature=``, ``sig=``).

    >>> redact_connection_secrets("AccountName=a;AccountKey=c2VjcmV0;BlobEndpoint=x")
    'AccountName=a;AccountKey=***;BlobEndpoint=x'
    """
    return _CONNECTION_SECRETS.sub(lambda m: f"{m.group(1)}=***", text)


__all__ = [
    "AZURE_SCHEMES",
    "REFUSED_SCHEMES",
    "SECRET_VARIABLES",
    "AzureAccount",
    "AzurePlace",
    "azure_account",
    "azure_filesystem",
    "azure_place",
    "duckdb_secret_fields",
    "is_azure",
    "redact_connection_secrets",
    "supported_spellings",
]
