-- 0017 dashboard sessions in the database (API-6, API-2).
--
-- A browser that logs in to the dashboard holds a random session id in a cookie; this
-- table holds only the SHA-256 of that id, so any API process behind a load balancer
-- serves any session, and a copy of the table logs nobody in.
--   id_hash            hex SHA-256 of the session id
--   api_key_id         the tenant key the session was opened with (deleting the key
--                      deletes its sessions; revoking it ends them: they are refused at
--                      once and deleted with the revocation)
--   operator_key_hash  for a session opened with the operator's key: the SHA-256 of that
--                      key, so a session ends when the operator's key changes
--   expires_at         sliding: a request moves it to "now" plus the idle limit (at most
--                      one write a minute per session); logout deletes the row, and the
--                      retention pass deletes expired rows
-- Expand only: a new table no earlier release reads.
--
-- kind: expand
-- min_reader_version: 2
create table if not exists punctual_sessions (
  id_hash text primary key,
  api_key_id uuid references punctual_api_keys (id) on delete cascade,
  operator_key_hash text,
  created_at timestamptz not null default now(),
  last_used_at timestamptz not null default now(),
  expires_at timestamptz not null,
  check ((api_key_id is null) <> (operator_key_hash is null))
);

create index if not exists punctual_sessions_expires on punctual_sessions (expires_at);
create index if not exists punctual_sessions_api_key on punctual_sessions (api_key_id);
