"""The Hadoop connector a checkpoint's filesystem needs on Spark's classpath, by URI scheme.

Spark keeps its streaming checkpoint through Hadoop's ``FileSystem`` of the checkpoint's scheme,
and panestore reads and writes the run's directory through the same one while a session runs
(:mod:`jobs.checkpoint.files`). Local paths, ``file://`` and ``hdfs://`` need nothing beyond
Spark's own Hadoop jars; ``s3a://`` needs ``hadoop-aws`` (and the AWS SDK bundle), ``abfss://``
``hadoop-azure``, ``gs://`` Google's ``gcs-connector-hadoop3-*-shaded.jar``. A managed cluster
(Dataproc, EMR, Databricks, Synapse, HDInsight) has its cloud's connector already; a session
panestore starts itself adds the GCS connector where the ``pyspark-gcs`` wheel provides it
(``pip install 'panestore[gcs]'``). docs/cluster.md, "The checkpoint", lists the jars.

``STORAGE_EMULATOR_HOST`` (the variable Google's clients read for an emulator, as the Python
filesystem does) points the connector at that endpoint, without credentials.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from urllib.parse import urlparse

GCS_FILESYSTEM = "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFileSystem"
GCS_ABSTRACT_FILESYSTEM = "com.google.cloud.hadoop.fs.gcs.GoogleHadoopFS"


def gcs_connector_jar() -> Path | None:
    """Google's shaded connector jar the ``pyspark-gcs`` wheel ships (None: not installed)."""
    try:
        package = importlib.import_module("pyspark_gcs")  # the optional extra 'gcs'
    except ImportError:
        return None
    jars = sorted(
        (Path(package.__file__ or "").parent / "jars").glob("gcs-connector-hadoop3-*.jar")
    )
    return jars[-1] if jars else None


def connector_conf(location: str | None) -> dict[str, str]:
    """The Spark settings a session needs for a checkpoint at ``location`` (empty: none, or a
    scheme whose connector the cluster provides): for ``gs://``, the connector jar when
    installed and its filesystem classes; with ``STORAGE_EMULATOR_HOST``, that endpoint and
    no authentication."""
    if location is None or urlparse(location).scheme.lower() != "gs":
        return {}
    conf = {
        "spark.hadoop.fs.gs.impl": GCS_FILESYSTEM,
        "spark.hadoop.fs.AbstractFileSystem.gs.impl": GCS_ABSTRACT_FILESYSTEM,
    }
    jar = gcs_connector_jar()
    if jar is not None:
        conf["spark.jars"] = str(jar)
    emulator = os.environ.get("STORAGE_EMULATOR_HOST")
    if emulator:
        url = emulator if "://" in emulator else f"http://{emulator}"
        conf |= {
            "spark.hadoop.fs.gs.storage.root.url": url,
            "spark.hadoop.fs.gs.auth.service.account.enable": "false",
            "spark.hadoop.fs.gs.auth.null.enable": "true",
            "spark.hadoop.fs.gs.project.id": "panestore",
        }
    return conf
