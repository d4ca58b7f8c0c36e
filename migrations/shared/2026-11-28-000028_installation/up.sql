-- Who this installation is, the same for every instance on one database: what it makes on
-- Docker hosts carries it, and it acts only on what carries it.
CREATE TABLE installation (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    id TEXT NOT NULL
);
