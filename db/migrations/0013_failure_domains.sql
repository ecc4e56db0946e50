-- Failure domains (issue 19): the rack, chassis or power feed a node shares with other nodes.
-- The storage service places a block's replicas in distinct domains, and a rolling upgrade with
-- --batch domain takes a whole domain down at once. NULL: the node is a domain of its own.
ALTER TABLE nodes ADD COLUMN failure_domain TEXT;
