# What the scripted shell agent runs: the answer, and a file nobody declared.
echo 42 > result.txt
echo "not an artifact" > agent-only.txt
