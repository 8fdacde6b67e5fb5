#!/bin/bash
echo 1 > /logs/verifier/reward.txt   # written, but the verifier never finishes
sleep 60
