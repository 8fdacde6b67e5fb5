# What the scripted shell agent runs (a real agent reads it as a task):
# answer 42 in result.txt, and leave the rest of its work around.
echo 42 > /app/result.txt
mkdir -p /app/out && echo kept > /app/out/a.txt && echo scratch > /app/out/b.tmp
echo "not an artifact" > /app/agent-only.txt
echo "a note" > /logs/artifacts/note.txt
