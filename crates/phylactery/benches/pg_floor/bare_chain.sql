\set n random(1, 4000000000000)
-- Five bare inserts in the chain's commit structure: the first and fourth synced (see run.sh).
\set n1 :n + 1
\set n2 :n + 2
\set n3 :n + 3
\set n4 :n + 4
SET synchronous_commit = on;
INSERT INTO bare (id, payload) VALUES (:n, 'payload');
SET synchronous_commit = off;
INSERT INTO bare (id, payload) VALUES (:n1, 'payload');
INSERT INTO bare (id, payload) VALUES (:n2, 'payload');
SET synchronous_commit = on;
INSERT INTO bare (id, payload) VALUES (:n3, 'payload');
SET synchronous_commit = off;
INSERT INTO bare (id, payload) VALUES (:n4, 'payload');
