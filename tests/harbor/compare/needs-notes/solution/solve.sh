#!/bin/bash
echo 42 > answer.txt
