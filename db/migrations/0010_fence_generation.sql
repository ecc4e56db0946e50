-- Fencing in single mode (issue 17; docs/hcagent.md "Fencing"): the controller's start
-- generation, one more at every `hcctld run`, sent to agents as the term (X-HC-Term) of
-- controller/ha/fence.h. One row, written once per start (controller/ha/fence_store.c); kept
-- out of the tables the poller rewrites every cycle. It only grows: an agent refuses a
-- controller whose term is lower than one it has seen, so a generation that went back would
-- lock this controller out of its own nodes.
CREATE TABLE fence_generation (
    generation  INTEGER NOT NULL CHECK (generation >= 0)
);
INSERT INTO fence_generation (generation) VALUES (0);
CREATE TRIGGER fence_generation_one_row BEFORE INSERT ON fence_generation
BEGIN SELECT RAISE(ABORT, 'fence_generation holds one row'); END;
CREATE TRIGGER fence_generation_kept BEFORE DELETE ON fence_generation
BEGIN SELECT RAISE(ABORT, 'fence_generation holds one row'); END;
CREATE TRIGGER fence_generation_grows BEFORE UPDATE ON fence_generation
WHEN NEW.generation < OLD.generation
BEGIN SELECT RAISE(ABORT, 'the fence generation only grows'); END;
