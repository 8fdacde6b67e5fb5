#!/bin/bash
touch a.txt b.txt
