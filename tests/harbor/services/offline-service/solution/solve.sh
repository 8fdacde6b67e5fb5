#!/bin/bash
exec 3<>/dev/tcp/echo/7000
echo ping >&3
head -n1 <&3 > answer.txt
