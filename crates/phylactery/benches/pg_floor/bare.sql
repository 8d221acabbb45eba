\set n random(1, 4000000000000)
-- The bare single-row insert, synchronous commit (see run.sh).
INSERT INTO bare (id, payload) VALUES (:n, 'payload');
