#!/bin/bash
want=$(python3 -c "
import sqlite3
db = sqlite3.connect('file:/srv/shop.db?mode=ro', uri=True)
print(db.execute('select customer, sum(total) s from orders group by customer order by s desc limit 1').fetchone()[0])
")
if [ "$(tr -d '[:space:]' < /app/answer.txt 2>/dev/null)" = "$want" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
