-- Node identity and token scope (issue 12, docs/security.md).
-- nodes.cert_pin: the SHA-256 of the node certificate's public key (SPKI), in libcurl's
-- "sha256//BASE64" form. The controller pins it on every call to the node's agent_url, so the
-- agent answering there must hold the key this node enrolled with. Rows from before this
-- migration are filled at the next start (hcctld computes it from cert_pem).
ALTER TABLE nodes ADD COLUMN cert_pin TEXT;
-- agent_url is stored without a trailing '/', so that a call's URL finds its node by equality.
UPDATE nodes SET agent_url = rtrim(agent_url, '/');
CREATE INDEX nodes_agent_url ON nodes(agent_url);

-- Join tokens minted for one node: the address (and name) its certificate will carry. A token
-- without a bound address enrolls only an agent whose agent_url host is the request's source.
ALTER TABLE tokens ADD COLUMN bound_address TEXT;
ALTER TABLE tokens ADD COLUMN bound_name TEXT;
-- API tokens limited to one resource: 'bundle:VERSION' may only download that bundle
-- (the tokens handed to agents to stage software). NULL: the role alone decides.
ALTER TABLE tokens ADD COLUMN scope TEXT;
-- The operation that created a scoped token; it is deleted when that operation ends.
ALTER TABLE tokens ADD COLUMN op_id TEXT;
