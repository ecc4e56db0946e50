-- Software bundles (issue 5). The verified .tar.gz and its signature line live in
-- DATA_DIR/bundles/<version>.tar.gz(.sig); this table describes them. A version is unique across
-- names: it is the key of the API (/v1/software/{version}) and a directory name on the nodes.
CREATE TABLE bundles (
    id              INTEGER PRIMARY KEY,
    name            TEXT NOT NULL,
    version         TEXT NOT NULL UNIQUE,
    sha256          TEXT NOT NULL,       -- of the .tar.gz, lowercase hex
    signature       TEXT NOT NULL,       -- the signature line ("hcsig1 KEYID SHA256 BASE64")
    signed_by       TEXT NOT NULL,       -- name of the trusted key that verified it
    manifest_json   TEXT NOT NULL,
    size            INTEGER NOT NULL,    -- bytes of the .tar.gz
    uploaded_at     INTEGER NOT NULL,
    uploaded_by     TEXT
);

-- The version each node's agent would roll back to (its "previous" link), from /v1/status: a
-- bundle that some node may roll back to cannot be removed.
ALTER TABLE nodes ADD COLUMN previous_software_version TEXT;
