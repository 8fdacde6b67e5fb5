#!/bin/bash
echo "$DEBIAN_FRONTEND" > /logs/agent/frontend.txt
[ -e /tests ] && echo tests-visible > /logs/agent/oracle-saw-tests.txt
echo hello > greeting.txt
echo "$HOME" > /logs/agent/home.txt  # the home of the user it runs as (root), as under docker exec -u
