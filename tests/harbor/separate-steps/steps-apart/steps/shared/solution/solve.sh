echo one > /app/a.txt
echo kept > /app/kept.txt
