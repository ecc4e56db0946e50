-- Network checks (issue 4): what an operation found, as a JSON document (net.check stores the
-- pair matrix and its findings; net.set_mtu its per-node changes; net.bench its throughputs;
-- cluster.create and node.add the check they end with). NULL when the operation stores none.
ALTER TABLE operations ADD COLUMN result_json TEXT;
