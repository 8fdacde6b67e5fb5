#!/bin/bash
echo done > done.txt
sleep 60
