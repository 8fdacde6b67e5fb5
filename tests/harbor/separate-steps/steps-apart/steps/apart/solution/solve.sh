echo two > /app/b.txt
