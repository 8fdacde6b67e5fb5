# What the scripted shell agent runs: it finds the healthcheck passed, and leaves work behind.
[ -f /tmp/ready ] && echo "ready before me" > /app/saw-ready.txt
mkdir -p /app/out && echo kept > /app/out/result.txt && echo noise > /app/out/debug.log
