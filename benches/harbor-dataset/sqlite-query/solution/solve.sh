#!/bin/bash
python3 -c "
import sqlite3
db = sqlite3.connect('/srv/shop.db')
print(db.execute('select customer from orders group by customer order by sum(total) desc limit 1').fetchone()[0])
" > /app/answer.txt
