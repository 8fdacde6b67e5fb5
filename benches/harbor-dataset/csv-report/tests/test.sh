#!/bin/bash
python3 /tests/check_report.py
