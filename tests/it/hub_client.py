"""The real Hugging Face clients, driven by hub_parity.rs and datasets.rs.

  hub_client.py snapshot REPO_ID REVISION CACHE_DIR
      huggingface_hub.snapshot_download of a dataset repo from HF_ENDPOINT
      (with HF_TOKEN, if set); prints one JSON object: {"ok": true,
      "files": {path: sha256 of the bytes got}, "blobs": the names of the
      blobs in its cache (each file's ETag)} or {"ok": false, "error":
      the exception's class, "classes": its class and bases, "status": the
      HTTP status, "message": its first line}.

  hub_client.py parquet OUT ROWS_JSON
      Writes the rows (a JSON list of objects with string or null values)
      with pyarrow: snappy, dictionary encoding, two row groups; prints the
      rows pyarrow reads back, as JSON.

  hub_client.py read-parquet FILE
      Prints the rows pyarrow reads from FILE, as JSON, with each column's
      type and the file's compression codecs.
"""

import hashlib
import json
import os
import sys


def snapshot(repo_id, revision, cache_dir):
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(
            repo_id,
            repo_type="dataset",
            revision=revision,
            cache_dir=cache_dir,
        )
    except Exception as error:  # what is raised is the point of the check
        response = getattr(error, "response", None)
        print(
            json.dumps(
                {
                    "ok": False,
                    "error": type(error).__name__,
                    "classes": [c.__name__ for c in type(error).__mro__],
                    "status": getattr(response, "status_code", None),
                    "message": str(error).splitlines()[0] if str(error) else "",
                }
            )
        )
        return
    files = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            files[os.path.relpath(path, folder)] = digest
    blobs = sorted(os.listdir(os.path.join(os.path.dirname(os.path.dirname(folder)), "blobs")))
    print(json.dumps({"ok": True, "files": files, "blobs": blobs}))


def parquet(out, rows_json):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(rows_json) as f:
        rows = json.load(f)
    names = []
    for row in rows:
        for name in row:
            if name not in names:
                names.append(name)
    table = pa.table(
        {name: pa.array([row.get(name) for row in rows], type=pa.string()) for name in names}
    )
    # Half the rows a group, so there are two.
    pq.write_table(
        table,
        out,
        compression="snappy",
        use_dictionary=True,
        row_group_size=max(1, (len(rows) + 1) // 2),
    )
    back = pq.ParquetFile(out)
    assert back.metadata.num_row_groups == 2, back.metadata
    chunks = [
        back.metadata.row_group(g).column(c)
        for g in range(back.metadata.num_row_groups)
        for c in range(back.metadata.num_columns)
    ]
    assert all(chunk.compression == "SNAPPY" for chunk in chunks), chunks
    assert any("RLE_DICTIONARY" in chunk.encodings for chunk in chunks), chunks
    print(json.dumps(back.read().to_pylist()))


def read_parquet(path):
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    codecs = sorted(
        {
            file.metadata.row_group(g).column(c).compression
            for g in range(file.metadata.num_row_groups)
            for c in range(file.metadata.num_columns)
        }
    )
    schema = file.schema_arrow
    print(
        json.dumps(
            {
                "rows": file.read().to_pylist(),
                "types": {name: str(schema.field(name).type) for name in schema.names},
                "codecs": codecs,
            }
        )
    )


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    {"snapshot": snapshot, "parquet": parquet, "read-parquet": read_parquet}[command](*args)
