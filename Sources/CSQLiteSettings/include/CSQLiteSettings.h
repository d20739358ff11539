// SQLite's process-wide settings: sqlite3_config is variadic, so Swift cannot call it.
#pragma once

/// Turns off SQLite's memory statistics (SQLITE_CONFIG_MEMSTATUS). With them on, every
/// allocation SQLite makes takes one process-wide mutex to count it, so threads running
/// statements on different connections at once wait for each other. Must run before SQLite is
/// initialised (before the first connection opens); returns SQLite's result code (SQLITE_MISUSE
/// if it was too late, and nothing changed).
int passkeyd_sqlite_configure(void);
