from noteloom.cli import main

main()
