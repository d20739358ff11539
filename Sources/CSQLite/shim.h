// The system's SQLite (libsqlite3), as the Swift module CSQLite: the store calls its C API
// directly. Process-wide settings (sqlite3_config is variadic) are in CSQLiteSettings.
#pragma once

#include <sqlite3.h>
