-- The SQLite schema of a human evaluation (sarnmt.human.store); PRAGMA user_version holds its version.
CREATE TABLE task (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,              -- the language pair, e.g. en_de: a column of Table 5
  source_path TEXT NOT NULL,
  reference_path TEXT,
  show_reference INTEGER NOT NULL,
  lines INTEGER NOT NULL,                 -- lines in each input file
  sample_size INTEGER NOT NULL,
  seed INTEGER NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE system (
  task_id INTEGER NOT NULL REFERENCES task(id),
  idx INTEGER NOT NULL,                   -- creation order; 0 is the baseline
  name TEXT NOT NULL,
  path TEXT NOT NULL,
  PRIMARY KEY (task_id, idx),
  UNIQUE (task_id, name)
);
CREATE TABLE item (
  id INTEGER PRIMARY KEY,
  task_id INTEGER NOT NULL REFERENCES task(id),
  position INTEGER NOT NULL,              -- 1-based, the order items are presented in
  line INTEGER NOT NULL,                  -- 1-based line number in the input files
  source TEXT NOT NULL,
  reference TEXT,
  shown_order TEXT NOT NULL,              -- JSON: system idx of each output slot, as shown
  UNIQUE (task_id, position)
);
CREATE TABLE output (
  item_id INTEGER NOT NULL REFERENCES item(id),
  system_idx INTEGER NOT NULL,
  text TEXT NOT NULL,
  PRIMARY KEY (item_id, system_idx)
);
CREATE TABLE annotator (
  id INTEGER PRIMARY KEY,
  task_id INTEGER NOT NULL REFERENCES task(id),
  name TEXT NOT NULL,
  token TEXT NOT NULL UNIQUE,
  created_at TEXT NOT NULL,
  UNIQUE (task_id, name)
);
CREATE TABLE judgement (
  annotator_id INTEGER NOT NULL REFERENCES annotator(id),
  item_id INTEGER NOT NULL REFERENCES item(id),
  status TEXT NOT NULL CHECK (status IN ('ranked', 'skipped', 'broken')),
  ranks TEXT,                             -- JSON: rank of each output slot as shown (1 = best); NULL unless ranked
  shown_order TEXT NOT NULL,              -- JSON: the item's shown_order when judged
  comment TEXT NOT NULL DEFAULT '',
  shown_at TEXT,                          -- when the server sent the item to the page
  submitted_at TEXT NOT NULL,
  seconds REAL,                           -- submitted_at - shown_at
  submissions INTEGER NOT NULL DEFAULT 1, -- how many times this annotator submitted this item
  PRIMARY KEY (annotator_id, item_id)
);
