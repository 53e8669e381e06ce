mod debian/tmp/srl.ini
