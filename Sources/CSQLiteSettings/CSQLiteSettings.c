#include "CSQLiteSettings.h"

#include <sqlite3.h>

int passkeyd_sqlite_configure(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
