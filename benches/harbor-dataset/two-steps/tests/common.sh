# Shared by every step's test.sh (the task's tests/ merged with the step's).
write_reward() { if [ "$1" = 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt; }
