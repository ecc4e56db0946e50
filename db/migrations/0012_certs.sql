-- Certificate renewal and expiry warnings (issue 18 part 1; docs/certificates.md).
-- A renewal under way: the certificate issued to the node and not yet known to be in use. Its
-- key is pinned beside cert_pin until the node is seen serving one of the two.
ALTER TABLE nodes ADD COLUMN cert_next_serial TEXT;
ALTER TABLE nodes ADD COLUMN cert_next_pem TEXT;
ALTER TABLE nodes ADD COLUMN cert_next_pin TEXT;
-- The notAfter of cert_pem (epoch ms), for listing and checks without parsing every PEM; rows
-- from before this migration are filled at the next start (hc_identity_backfill).
ALTER TABLE nodes ADD COLUMN cert_not_after INTEGER;
-- When the controller renews it: two thirds into its lifetime (hc_pki_renew_at_ms).
ALTER TABLE nodes ADD COLUMN cert_renew_at INTEGER;
-- From when it counts as expiring (a warning: hc_pki_warn_at_ms, 30 days before its end or a
-- quarter of its lifetime, whichever is shorter).
ALTER TABLE nodes ADD COLUMN cert_warn_at INTEGER;
-- `hcctl node renew-cert` asked for a renewal at this time (epoch ms); NULL when none is asked.
-- Only an asked renewal may reach a node whose certificate has expired (by its pinned key).
ALTER TABLE nodes ADD COLUMN cert_renew_asked INTEGER;
-- Why the last renewal failed (NULL after a success, and when one is asked again).
ALTER TABLE nodes ADD COLUMN cert_renew_error TEXT;
-- What the agent said it serves (GET /v1/status cert_serial), NULL before agents reported it.
ALTER TABLE nodes ADD COLUMN agent_cert_serial TEXT;
-- The warnings already given: one event per certificate (by serial, or 'ca'/'server'/'client'
-- with the certificate's fingerprint) and level, not one per poll.
CREATE TABLE cert_alerts (
    subject TEXT NOT NULL,
    level   TEXT NOT NULL,      -- warning | error | expired
    at      INTEGER NOT NULL,   -- epoch ms
    PRIMARY KEY (subject, level)
);
-- A revoked certificate's notAfter: once it has passed, the entry leaves the revocation list
-- (an expired certificate is refused anyway), so renewals do not grow the list for ever.
-- NULL for entries from before (kept).
ALTER TABLE revoked_certs ADD COLUMN cert_not_after INTEGER;
-- What the agent said it trusts (GET /v1/status ca_digest: sha256 of its ca.pem).
ALTER TABLE nodes ADD COLUMN agent_ca_digest TEXT;
-- A CA rotation under way (controller/remote/ca_rotate.h): one row at most.
CREATE TABLE ca_rotation (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    phase           TEXT NOT NULL,    -- trust | reissue | drop
    old_fingerprint TEXT NOT NULL,
    new_fingerprint TEXT NOT NULL,
    old_pem         TEXT NOT NULL,
    new_pem         TEXT NOT NULL,
    bundle_pem      TEXT NOT NULL,    -- what every agent must trust in this phase
    bundle_digest   TEXT NOT NULL,    -- sha256 of bundle_pem
    started_at      INTEGER NOT NULL, -- epoch ms
    phase_at        INTEGER NOT NULL
);
