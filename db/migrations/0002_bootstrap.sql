-- Bootstrap over SSH (cluster create / node add): the storage interface chosen for each node,
-- and how the agent was installed there.
ALTER TABLE nodes ADD COLUMN storage_interface TEXT;
ALTER TABLE nodes ADD COLUMN install_mode TEXT;      -- systemd | daemon | manual
